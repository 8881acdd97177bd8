"""`python -m manager --kubeconfig FILE`: the kfed manager."""

from manager.main import main

raise SystemExit(main())
