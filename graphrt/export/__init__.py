"""Model layouts as OVMS's export script writes them, and the graph.pbtxt files it writes for each
task: on disk for `graphrt export`, in memory for `graphrt serve --model_path` (and the
`--lora_modules` splice into a served graph)."""
