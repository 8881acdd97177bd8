"""kfed's test bed: local Kubernetes control planes built from Go modules, scenarios, benchmarks."""
