"""What is served and how: the settings, the model repository (config.json and its reload), one
served graph (`GraphServable`), the policies applied to every servable, the embedded default
model."""
