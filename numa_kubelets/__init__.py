"""Pure core of numa-kubelets: configuration, partition plan, rendering. No Pulumi imports."""
