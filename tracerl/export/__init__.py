"""What tracerl learned, back to the agent: fine-tuning data in the shapes trainers read.

The labelled (relabelled, redacted) step table becomes, per dataset and per task-disjoint
split: SFT conversations (TRL conversational JSONL and Parquet, OpenAI fine-tuning JSONL
with a 0/1 weight per assistant message), KTO unpaired preferences and PRM stepwise
supervision, each record with its provenance, and a manifest. The SWiRL recipe chooses:
episodes by the outcome filter, steps weighted by the process check (relabel.filters).

- `conversation`: an episode rebuilt as the messages the agent had, one assistant message
  per turn;
- `formats`: the record shapes (and why each field is as it is);
- `select`: the checks, the weight and label rules, the task splits;
- `run`: `export_dataset`, which writes one dataset's files and manifest.
"""
