"""How torch runs a layer as kernels on each device, for the stand-in's census: recurrent layers as cuDNN runs
them (`cuda_rnn`) and as a CPU does (`cpu_rnn`), and scaled dot-product attention on a CPU (`cpu_attention`).
May import: the ground modules only."""
