"""The learning half of tracerl: one representation of logged decisions and one learner API.

- `encoding`: state encoders (a step table -> integer state rows, actions, valid actions);
- `transitions`: the one `Transitions` every learner and estimator reads;
- `features`: the feature maps over state rows (one-hot = the tabular case, hashed templates);
- `bellman`: the one tabular Bellman backup (the one-hot solve of FQI and FQE);
- `policy`: the one `Policy` protocol and the policies built from others;
- `bc`, `fqi`, `learners`: behaviour cloning, fitted Q iteration, the learner vocabulary;
- `artifact`: the one artifact format of a fitted policy.

Importing this package imports none of them (the data stages read `encoding` alone).
"""
