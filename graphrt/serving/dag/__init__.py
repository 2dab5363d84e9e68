"""OVMS's DAG pipelines (config.json's pipeline_config_list), checked and served as graphs."""
