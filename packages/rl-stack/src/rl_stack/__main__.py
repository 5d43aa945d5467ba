"""``python -m rl_stack``: the rl-stack command line."""

from rl_stack._cli import main

raise SystemExit(main())
