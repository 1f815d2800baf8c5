#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Creates the Glove service group (default "glove") if it does not exist.
# Only members of this group may execute the helpers. Idempotent.
set -euo pipefail
group="${1:-glove}"
if ! getent group "$group" >/dev/null; then
  groupadd --system "$group"
  echo "create-group: created system group $group"
fi
