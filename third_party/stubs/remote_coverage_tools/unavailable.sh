#!/bin/sh
echo "coverage tools are not available in kiln's offline build" >&2
exit 1
