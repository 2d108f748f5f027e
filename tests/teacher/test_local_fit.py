"""The bundled local teacher on a small machine (issue 31): its server runs one completion at a
time, so a run's teacher settings are fitted to it (arex.teacher.local.fitted): one call in flight
(a second one waited inside the server with its timeout running: with `--concurrency 4` on a busy
two-core machine 15 of 16 rollouts timed out), and a per-attempt timeout that a worst-case call
fits in at the speed measured when the server started. The fitting is tested without the model;
one local_model test measures the real server and makes concurrent calls through the fit."""

from __future__ import annotations

import asyncio
import time

import pytest

from arex.teacher.client import TeacherClient
from arex.teacher.config import LocalServerConfig, TeacherConfig
from arex.teacher.local import MARGIN, SLOTS, LocalTeacher, Speed, fitted
from arex.teacher.scripted import ScriptedServer

README = TeacherConfig(concurrency=4)  # the README's `--concurrency 4` run, the default teacher settings


def test_the_fit_caps_calls_in_flight_to_the_servers_slots():
    assert fitted(README, Speed(prompt_tps=400, generate_tps=40)).concurrency == SLOTS == 1
    assert fitted(README, Speed(400, 40), slots=2).concurrency == 2
    assert fitted(README.model_copy(update={"concurrency": 1}), Speed(400, 40), slots=4).concurrency == 1


def test_the_timeout_holds_a_worst_case_call_at_the_measured_speed():
    config = README.model_copy(update={"local": LocalServerConfig(n_ctx=8192), "max_tokens": 384})
    busy = Speed(prompt_tps=60, generate_tps=3)  # a two-core machine running other work
    worst = 8192 / 60 + 384 / 3  # a full context window in, max_tokens out: 264.5 s
    fit = fitted(config, busy)
    assert fit.timeout_s >= MARGIN * worst > config.timeout_s  # longer than the configured 300 s
    assert fit.max_wait_s >= 2 * fit.timeout_s  # room to retry one timed-out attempt
    slower = fitted(config, Speed(prompt_tps=30, generate_tps=1.5))
    assert slower.timeout_s > fit.timeout_s  # the timeout follows the speed
    idle = fitted(config, Speed(prompt_tps=4000, generate_tps=200))
    assert idle.timeout_s == config.timeout_s and idle.max_wait_s == config.max_wait_s  # never shorter


def test_a_config_with_its_own_endpoint_is_not_fitted():
    local = LocalTeacher()
    local.speed = Speed(prompt_tps=60, generate_tps=3)
    remote = README.model_copy(update={"base_url": "http://127.0.0.1:9/v1"})
    assert local.fit(remote) == remote
    assert local.fit(README).concurrency == 1


class Lingering(ScriptedServer):
    """Holds each reply while it is the only request in flight (up to HOLD_S): a second caller,
    if the client lets one through, is then seen in flight beside it."""

    HOLD_S = 0.1

    def _completion(self, request, reply):
        until = time.monotonic() + self.HOLD_S  # a backstop: with the cap, no second request comes
        while self.stats["in_flight"] < 2 and time.monotonic() < until:
            time.sleep(0.005)  # polling the server's own count
        return super()._completion(request, reply)


@pytest.mark.parametrize("fit", [True, False], ids=["fitted", "as configured"])
def test_fitted_settings_keep_one_call_in_flight_for_many_callers(fit):
    """Three rollouts' calls at once reach the server one at a time through the fitted settings
    (and, as configured, several at once: what queued inside the real server, timed)."""

    async def calls(config: TeacherConfig, base_url: str) -> list:
        client = TeacherClient(config, base_url=base_url)
        try:
            return await asyncio.gather(*(client.chat([{"role": "user", "content": f"{i}"}]) for i in range(3)))
        finally:
            await client.close()

    config = README.model_copy(update={"model": "scripted-teacher", "track_cost": False})
    config = fitted(config, Speed(400, 40)) if fit else config
    with Lingering(lambda request, i: "echo hi", model="scripted-teacher") as server:
        replies = asyncio.run(calls(config, server.base_url))
    assert [r.status for r in replies] == ["ok"] * 3
    assert (server.stats["max_in_flight"] == 1) == fit, server.stats["max_in_flight"]


@pytest.mark.local_model
def test_the_real_local_teacher_is_measured_and_its_fit_serves_concurrent_calls():
    teacher = LocalTeacher().start()
    try:
        assert teacher.speed is not None and teacher.speed.prompt_tps > 0 and teacher.speed.generate_tps > 0
        # a reply cut at 16 tokens is taken as it is: only a timeout could make a second attempt
        short = {"max_tokens": 16, "temperature": 0.0, "retry_truncated": False, "retry_empty": False}
        config = teacher.fit(README.model_copy(update=short))
        assert config.concurrency == 1 and config.timeout_s >= README.timeout_s

        async def ask() -> list:
            client = TeacherClient(config, base_url=teacher.base_url)
            try:
                prompts = ("Name a prime.", "Name a colour.", "Name a fruit.")
                return await asyncio.gather(*(client.chat([{"role": "user", "content": p}]) for p in prompts))
            finally:
                await client.close()

        replies = asyncio.run(ask())
    finally:
        teacher.stop()
    # every call answered on its first attempt: none waited out a timeout behind another
    assert all(r.status in ("ok", "truncated", "empty") and len(r.attempts) == 1 for r in replies), replies
