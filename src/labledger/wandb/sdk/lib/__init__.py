"""``wandb.sdk.lib``: only what integrations import."""
