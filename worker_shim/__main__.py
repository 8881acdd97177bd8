"""`python -m worker_shim --kubeconfig FILE`: kfed's admission on one (worker) cluster."""

from worker_shim.main import main

raise SystemExit(main())
