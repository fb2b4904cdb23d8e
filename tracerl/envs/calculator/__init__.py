"""The calculator agent of the book chapter, one module per job: the environment's rules
(`rules`), the hand-written and logging policies (`behavior`), the simulator (`simulator`),
the exact evaluator (`exact`), the log writer (`logs`), the state encoder (`encoder`),
replay (`replay`), verifiers, and the chapter table."""
