"""Build hook for setuptools (the rest of the build is configured in pyproject.toml).

The skills catalogue lives in the top-level skills/ folder, beside envs/ and configs/, not inside
the package; setuptools has no force-include, so build_py copies it into the wheel as arex/_skills,
where arex.envs.skills.bundled_skills finds an installed copy. Bytecode left by running a skill's
scripts on the host is not copied. An editable install reads the checkout's skills/ in place."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SKILLS = Path(__file__).resolve().parent / "skills"
SHIPPED = Path("arex") / "_skills"  # arex.envs.skills.SHIPPED


class BuildPyWithSkills(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / SHIPPED
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(SKILLS, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        # Listed so `install` records them (and uninstall removes them).
        shipped = Path(self.build_lib) / SHIPPED
        extra = [str(p) for p in shipped.rglob("*") if p.is_file()] if shipped.is_dir() else []
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={"build_py": BuildPyWithSkills})
