"""kfed manager: global queues, capacity-aware dispatch and failover across worker clusters."""
