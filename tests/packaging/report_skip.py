#!/usr/bin/env python3
"""Reports a packaging check as skipped (exit 77) with the reason given as
arguments: for checks that cannot mean anything in this build."""
import sys

from pkgtest import skip

skip(" ".join(sys.argv[1:]))
