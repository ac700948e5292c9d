"""Studies built on the protocol: experiments (the paper's tables, ablations), the memory
mechanisms compared against, and analyses of runs and real model outputs."""
