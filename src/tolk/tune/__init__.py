"""`tolk tune`: find the batching configuration that fits a measured workload."""
