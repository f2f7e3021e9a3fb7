"""Podium's command-line client (no Django): ``podium-upload`` sends a checkpoint folder to a Podium
server through its submissions API and resumable (tus) uploads. See docs/uploads.md."""
