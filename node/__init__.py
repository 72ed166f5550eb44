"""verispec node: protocol math, decoding engine, chain client, roles and CLI."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# the bundled draft/target pair (scripts/train_models.py): the default models of the CLI and the demo
BUNDLED_TARGET = PROJECT_ROOT / "models" / "target"
BUNDLED_DRAFT = PROJECT_ROOT / "models" / "draft"
