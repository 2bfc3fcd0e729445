"""The MTP head (DeepSeek-V3 style multi-token prediction), its checkpoint layouts and how engines serve it."""
