"""Analysis of benchmarks and selectors: `diagnose` (how much there is to learn), the supervised
bound on z_t, and the simulator's calibration. Nothing here is used by the env or the protocol."""
