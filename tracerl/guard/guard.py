"""`Guard`: score a proposed tool call, in the agent's own shape, against the logs.

The history is the OpenAI-chat messages the agent has so far (system, user, assistant text
or `tool_calls`, `tool` results) and the proposed call `{name, arguments}` (arguments an
object or its JSON text). Both go through the `openai-chat` adapter and the pipeline's own
encoder (`models/encoder.json`, saved by the train stage), so the state the guard looks up
is the state the learners and OPE saw at that point of a logged conversation. The table
(`tracerl.guard.core`) says the rest; the call's arguments are judged against the logged
ones (`tracerl.guard.arguments`), and what the logs never showed is denied by default
(`guard.unseen`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from tracerl.config.guard import GuardSettings
from tracerl.guard.arguments import ArgumentRanges
from tracerl.guard.core import (
    BLOCK_UNSEEN,
    DENIED,
    VERDICTS,
    WARN_UNSUPPORTED,
    GuardTable,
    Judgement,
)

PROPOSED_CALL_ID = "tracerl_guard_proposed"


class GuardInputError(ValueError):
    """A history or call the guard cannot read (the reason names the message and field)."""


def _arguments_text(call: Mapping[str, Any]) -> str:
    return orjson.dumps(arguments_of(call)).decode()


def arguments_of(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments object (given as one, or as its JSON text)."""
    args = call.get("arguments", {})
    if isinstance(args, str):
        try:
            value = orjson.loads(args)
        except orjson.JSONDecodeError as exc:
            raise GuardInputError(f"call.arguments: not valid JSON text: {exc}") from None
    else:
        value = args
    if not isinstance(value, dict):
        raise GuardInputError(f"call.arguments: expected an object (or its JSON text), got "
                              f"{type(value).__name__}")
    return value


def _check(history: Any, call: Any) -> None:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) \
            or not call["name"]:
        raise GuardInputError("call: expected an object with a non-empty string `name` "
                              "(and `arguments`)")
    if not isinstance(history, Sequence) or isinstance(history, str | bytes):
        raise GuardInputError("messages: expected a list of chat messages")


CONTEXT_FIELDS = ("task", "domain")


def _check_context(context: Any) -> dict[str, str]:
    if context is None:
        return {}
    if not isinstance(context, Mapping) or set(context) - set(CONTEXT_FIELDS) or not all(
            isinstance(v, str) for v in context.values()):
        raise GuardInputError(f"context: expected an object of strings with keys among "
                              f"{list(CONTEXT_FIELDS)}, got {context!r}")
    return dict(context)


def conversation_steps(history: Sequence[Mapping[str, Any]], call: Mapping[str, Any],
                       context: Mapping[str, str] | None = None) -> pa.Table:
    """The step table of `history` followed by an assistant message making `call` (its
    last row), as ingest would store it (rewards 0: the guard reads states only).
    context: what the log's adapter would have set on every step and a chat history does
    not hold: the task id (`task`) and the episode's domain (`domain`, tau2's)."""
    from tracerl.data.formats import AdapterError
    from tracerl.data.formats.openai_chat.read import conversation_rows
    from tracerl.data.ingest.parse import absorb_unknown, records_to_table
    from tracerl.data.schema import RecordError, check_record

    _check(history, call)
    context = _check_context(context)
    proposed = {"role": "assistant", "content": None, "tool_calls": [
        {"id": PROPOSED_CALL_ID, "type": "function",
         "function": {"name": call["name"], "arguments": _arguments_text(call)}}]}
    try:
        record = {"messages": [*history, proposed]}
        if "task" in context:
            record["task_id"] = context["task"]
        rows, pointers, _ = conversation_rows(record, "", "guard")
        rows = [absorb_unknown(r) for r in rows]
        if "domain" in context:
            rows = [{**r, "episode": {**(r.get("episode") or {}),
                                      "domain": context["domain"]}} for r in rows]
        for r in rows:
            check_record(r)
    except (AdapterError, RecordError) as exc:
        raise GuardInputError(f"messages: {exc}") from None
    table = records_to_table(rows, "guard", list(range(1, len(rows) + 1)), pointers)
    return table.set_column(table.schema.get_field_index("reward"), "reward",
                            pa.array(np.zeros(table.num_rows)))


def encode_call(encoder: Any, history: Sequence[Mapping[str, Any]],
                call: Mapping[str, Any], context: Mapping[str, str] | None = None
                ) -> tuple[np.ndarray | None, int, str | None]:
    """(the encoder's state row before the call, the call's action index (-1: a tool the
    encoder's vocabulary does not hold), why the state is unknown (None when known)).

    A call outside the vocabulary still has a state: it is read with a call the
    vocabulary holds in its place (the state before an action never depends on it). A
    history the encoder cannot place at all (a tool no log ever called, say) has none."""
    _check(history, call)
    name = call["name"]
    actions = list(encoder.actions)
    stand_ins = [name] if name in actions else [a for a in actions]
    last_error: Exception | None = None
    for stand_in in stand_ins:  # over the vocabulary only for a call outside it
        steps = conversation_steps(history, {**call, "name": stand_in}, context)
        try:
            tr = encoder.transitions(steps)
        except ValueError as exc:
            last_error = exc
            continue
        last = int(np.flatnonzero(tr.t == tr.t.max())[-1])
        return tr.rows[tr.s[last]].copy(), actions.index(name) if name in actions else -1, \
            None
    return None, -1, f"the logs' encoder cannot place this history: {last_error}"


class Guard:
    """A proposed call's support, Q and advantage with intervals, and a verdict (see
    `tracerl.guard.core`). Build it with `fit` (transitions), `load` (a pipeline's saved
    encoder and labelled steps) or `from_params`."""

    def __init__(self, table: GuardTable, behavior_model: Any = None,
                 source: Mapping[str, Any] | None = None,
                 arguments: ArgumentRanges | None = None) -> None:
        self.table = table
        self.arguments = arguments  # None: arguments are not judged
        self.encoder = table.encoder
        self.settings = table.settings
        self.behavior_model = behavior_model
        self.source = dict(source or {})

    @classmethod
    def fit(cls, tr: Any, settings: GuardSettings | None = None, *, gamma: float,
            value_range: tuple[float, float] | None = None, behavior_model: Any = None,
            source: Mapping[str, Any] | None = None, steps: pa.Table | None = None) -> Guard:
        """From a dataset's transitions (made by the encoder that will read histories);
        `steps`, the step table they come from, for the logged arguments."""
        return cls(GuardTable.fit(tr, settings, gamma=gamma, value_range=value_range),
                   behavior_model, source,
                   ArgumentRanges.fit(steps) if steps is not None else None)

    @classmethod
    def load(cls, models_dir: Path | str, steps_dir: Path | str,
             settings: GuardSettings | None = None, *, gamma: float,
             value_range: tuple[float, float] | None = None,
             dataset: str | None = None) -> Guard:
        """From the train stage's artifacts: the encoder it fitted (models/encoder.json),
        the dataset's behaviour model when it saved one (models/<dataset>/bc.json, a
        logistic or frequency BC: pi_hat_b, reported beside the frequencies) and the
        dataset's labelled steps the critic is fitted on."""
        from tracerl.io.fileio import read_table
        from tracerl.rl.artifact import load_policy
        from tracerl.rl.bc import CountBC, LogisticBC
        from tracerl.rl.encoding import encoder_of

        models_dir, steps_dir = Path(models_dir), Path(steps_dir)
        spec_file = models_dir / "encoder.json"
        if not spec_file.is_file():
            raise FileNotFoundError(f"{spec_file}: no encoder saved there (run the train "
                                    "stage first)")
        encoder = encoder_of(orjson.loads(spec_file.read_bytes()))
        steps = read_table(steps_dir)
        tr = encoder.transitions(steps)
        model, bc_file = None, models_dir / (dataset or "") / "bc.json"
        if dataset is not None and bc_file.is_file():
            policy = load_policy(bc_file, encoder)
            if isinstance(policy, LogisticBC) or (isinstance(policy, CountBC)
                                                  and policy.act_rule == "frequencies"):
                model = policy  # an argmax clone is not a behaviour model
        return cls.fit(tr, settings, gamma=gamma, value_range=value_range,
                       behavior_model=model, steps=steps,
                       source={"dataset": dataset, "steps": str(steps_dir),
                               "encoder": str(spec_file),
                               "behavior_model": str(bc_file) if model is not None else None})

    @classmethod
    def from_params(cls, params: Any, dataset: str | None = None) -> Guard:
        """From a pipeline's checked params: `guard:` settings, paths.models,
        paths.labelled/<dataset>/steps, gamma, ope.return_range when given."""
        settings = params.guard
        names = params.dataset_names()
        dataset = dataset or settings.dataset or (names[0] if names else None)
        if dataset is None:
            raise ValueError("the params name no dataset for the guard (guard.dataset)")
        value_range = params.ope.return_range if params.ope is not None else None
        return cls.load(params.paths.models, Path(params.paths.labelled) / dataset / "steps",
                        settings, gamma=params.gamma, value_range=value_range,
                        dataset=dataset)

    # -- judging

    def judge_rows(self, rows: np.ndarray, actions: np.ndarray) -> Judgement:
        """Vectorised: the table's answer for encoder rows and action indices."""
        return self.table.judge(rows, actions)

    def score(self, history: Sequence[Mapping[str, Any]], proposed_call: Mapping[str, Any],
              context: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The verdict on `proposed_call` after `history` (see the module docstring), as
        JSON-ready data; `context` ({task, domain}) when the pipeline's encoder reads
        them (`conversation_steps`). GuardInputError when any cannot be read."""
        row, action, unknown = encode_call(self.encoder, history, proposed_call, context)
        s = self.settings
        name = proposed_call["name"]
        out: dict[str, Any] = {"call": name, "confidence": s.confidence,
                               "thresholds": {"min_count": s.min_count,
                                              "min_behavior_prob": s.min_behavior_prob,
                                              "block_advantage": s.block_advantage,
                                              "unseen": s.unseen}}
        scored, unseen = self.arguments.judge(name, arguments_of(proposed_call)) \
            if self.arguments is not None else ({}, [])
        if action < 0:
            unseen.insert(0, f"tool {name!r} is never called in the logs")
        if row is None:
            unseen.insert(0, unknown or "the logs' encoder cannot place this history")
            verdict = BLOCK_UNSEEN if s.unseen == "deny" else WARN_UNSUPPORTED
            return {**out, "verdict": verdict, "allowed": verdict not in DENIED,
                    "state": None,
                    "support": {"supported": False, "count": 0, "state_count": 0,
                                "behavior_prob": 0.0, "behavior_model_prob": None},
                    "q": None, "v": None, "advantage": None, "interval": None, "flags": [],
                    "arguments": scored, "unseen": unseen, "reason": "; ".join(unseen)}
        j = self.table.judge(row[None, :], np.asarray([action]))
        verdict = VERDICTS[int(j.verdict[0])]
        if unseen:  # never logged: no count or value of the table can vouch for it
            verdict = BLOCK_UNSEEN if s.unseen == "deny" else WARN_UNSUPPORTED
        model_prob = None
        if self.behavior_model is not None and action >= 0:
            model_prob = float(np.asarray(self.behavior_model.action_probs(row[None, :]))[
                0, action])
        supported = bool(j.supported[0])

        def interval(value: float, low: float, high: float) -> dict[str, float] | None:
            return {"value": float(value), "low": float(low), "high": float(high)} \
                if supported else None

        out.update(
            verdict=verdict, allowed=verdict not in DENIED,
            state=self.encoder.labels(row[None, :])[0],
            support={"supported": supported, "count": int(j.count[0]),
                     "state_count": int(j.state_count[0]),
                     "behavior_prob": float(j.behavior_prob[0]),
                     "behavior_model_prob": model_prob},
            q=interval(j.q[0], j.q_low[0], j.q_high[0]),
            v=float(j.v[0]) if bool(j.known_state[0]) else None,
            advantage=interval(j.advantage[0], j.advantage_low[0], j.advantage_high[0]),
            interval=self.table.interval if supported else None,
            flags=list(j.flags[0] or ()), arguments=scored, unseen=unseen,
            reason="; ".join(unseen) if unseen else _reason(j, action, name, s))
        return out

    def describe(self) -> dict[str, Any]:
        """What the guard was built from (GET /health)."""
        return {"encoder": self.encoder.name, "states": self.table.n_states,
                "actions": list(self.table.actions), "gamma": self.table.gamma,
                "value_range": list(self.table.value_range), "source": self.source,
                "settings": {k: v for k, v in self.settings.dump().items()
                             if k != "token_env"},
                "arguments_judged": self.arguments is not None}


def _reason(j: Judgement, action: int, name: str, s: GuardSettings) -> str:
    if action < 0:
        return f"tool {name!r} is never called in the logs"
    if not bool(j.known_state[0]):
        return "the logs never reach this state"
    count, prob = int(j.count[0]), float(j.behavior_prob[0])
    if count < s.min_count:
        return f"never logged at this state ({int(j.state_count[0])} logged steps there)" \
            if count == 0 else f"logged {count} time(s) here, fewer than {s.min_count}"
    if not bool(j.supported[0]):
        return (f"logged {count} of {int(j.state_count[0])} times here: behaviour "
                f"probability {prob:.3g} < {s.min_behavior_prob:g}")
    a, lo, hi = (float(x[0]) for x in (j.advantage, j.advantage_low, j.advantage_high))
    if hi < s.block_advantage:
        return (f"advantage {a:+.3f} [{lo:+.3f}, {hi:+.3f}] under the logging policy: "
                f"below {s.block_advantage:+g} at confidence {s.confidence:g}")
    return f"advantage {a:+.3f} [{lo:+.3f}, {hi:+.3f}]: not confidently below " \
           f"{s.block_advantage:+g}"
