"""Plain OpenVINO models (OVMS model_config_list): versions, pools of infer requests, metadata."""
