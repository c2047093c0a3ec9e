"""The parts of ``wandb.sdk`` that integrations import (``wandb.sdk.lib.config_util.ConfigError``)."""
