"""The exported rows' parquet schemas, in one place, and the schema of each granularity.

Tool-call arguments are arrow.json (pyarrow 19+), which `datasets` loads as objects, the form chat
templates take; rows are built with them as JSON text and cast (`storage`, `arex.dataset.shards`).
"""

from __future__ import annotations

import pyarrow as pa

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema(
    [
        ("messages", pa.list_(MESSAGE)),
        ("weights", pa.list_(pa.float32())),
        ("trajectory_id", pa.string()),
        ("env_id", pa.string()),
        ("env_kind", pa.string()),
        ("domain", pa.string()),
        ("round", pa.int32()),
        ("rounds", pa.int32()),
        ("public_score", pa.float64()),
        ("held_out_score", pa.float64()),
        ("first_held_out", pa.float64()),
        ("best_held_out", pa.float64()),
        ("final_held_out", pa.float64()),
        ("baseline_score", pa.float64()),
        ("improvement", pa.float64()),
        ("teacher", pa.string()),
        ("config_hash", pa.string()),
        ("arex_version", pa.string()),
    ],
    metadata={"arex.schema": "1", "arex.weights": "per message; assistant turns carry the loss"},
)
"""The row schema, in one place. `round` is null on trajectory rows; `public_score` and
`held_out_score` are that round's (the final round's on trajectory rows); `public_score` is null
for an env with nothing public to score (a judge problem without sample tests). Scores are
higher-is-better: metrics to minimise are negated."""

_META = [f for f in SCHEMA if f.name not in ("messages", "weights", "round")]
CALL_SCHEMA = pa.schema(
    [
        ("prompt", pa.list_(MESSAGE)),
        ("completion", pa.list_(MESSAGE)),
        ("weight", pa.float32()),
        ("kind", pa.string()),
        ("round", pa.int32()),
        ("step", pa.int32()),
        *_META,
    ],
    metadata={"arex.schema": "1", "arex.weights": "per row: the completion's weight"},
)
"""A `calls` row: `prompt` is the exact request of one teacher call, `completion` its reply (one
assistant message); `kind` is `action` or `reflection`, `step` null for a reflection."""
TOKEN_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("labels", pa.list_(pa.int32())),
        ("weights", pa.list_(pa.float32())),
        ("round", pa.int32()),
        ("first_round", pa.int32()),
        ("last_round", pa.int32()),
        ("step", pa.int32()),
        *_META,
    ],
    metadata={"arex.schema": "1", "arex.weights": "per token; labels are -100 where the weight is 0"},
)
"""A token row (`tokens/<granularity>/`): `labels` is `input_ids` with -100 on tokens of weight 0,
`weights` one per token; `first_round`..`last_round` are the rounds it holds (a trajectory row
longer than `export.max_length` is cut into parts at round boundaries)."""


def _tool_message(arguments: pa.DataType) -> pa.DataType:
    function = pa.struct([("name", pa.string()), ("arguments", arguments)])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", function)])
    return pa.struct(
        [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)), ("tool_call_id", pa.string())]
    )


def _with_tools(schema: pa.Schema, arguments: pa.DataType) -> pa.Schema:
    """`schema` with tool-call messages and a `tools` column (after the conversation columns)."""
    message = pa.list_(_tool_message(arguments))
    fields = [pa.field(f.name, message) if f.type == pa.list_(MESSAGE) else f for f in schema]
    at = max(i for i, f in enumerate(fields) if f.name in ("weights", "completion")) + 1
    fields.insert(at, pa.field("tools", pa.string()))
    metadata = {
        **schema.metadata,
        b"arex.tools": b"messages carry tool_calls / tool_call_id; tools: the tool definitions as JSON text",
    }
    return pa.schema(fields, metadata=metadata)


_ARGUMENTS = pa.json_() if hasattr(pa, "json_") else pa.string()
TOOL_SCHEMA = _with_tools(SCHEMA, _ARGUMENTS)
"""`SCHEMA` for an export holding `tools`-format trajectories: `messages` items also have
`tool_calls` ([{id, type, function: {name, arguments}}]) and `tool_call_id`; `tools` is the tool
definitions as JSON text (null for a `text` trajectory)."""
TOOL_CALL_SCHEMA = _with_tools(CALL_SCHEMA, _ARGUMENTS)
"""`CALL_SCHEMA` with tool-call messages and `tools`, as `TOOL_SCHEMA`."""


def _as_text(type_: pa.DataType) -> pa.DataType:
    """`type_` with every arrow.json part as plain text (what `pa.Table.from_pylist` can build)."""
    if isinstance(type_, pa.BaseExtensionType):
        return type_.storage_type
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, _as_text(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(_as_text(type_.value_type))
    return type_


def storage(schema: pa.Schema) -> pa.Schema:
    """The schema rows are built in (tool-call arguments as JSON text); `schema` itself if the same."""
    storage = pa.schema([pa.field(f.name, _as_text(f.type)) for f in schema], metadata=schema.metadata)
    return schema if storage.equals(schema) else storage


ROW_SCHEMAS: dict[str, tuple[pa.Schema, pa.Schema]] = {
    "rounds": (SCHEMA, TOOL_SCHEMA),
    "trajectories": (SCHEMA, TOOL_SCHEMA),
    "calls": (CALL_SCHEMA, TOOL_CALL_SCHEMA),
}
"""Each granularity's schema: (text-only exports, exports holding `tools` trajectories)."""


def schema_for(granularity: str, tools: bool) -> pa.Schema:
    return ROW_SCHEMAS[granularity][1 if tools else 0]
