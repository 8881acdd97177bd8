#!/usr/bin/env bash
# The first apt source of this machine that serves a suite: where debootstrap gets Debian
# packages from (a local mirror on an air-gapped network, if that is what apt uses here).
#
#   deploy/image/apt-mirror.sh SUITE [SOURCES_FILE...]
#
# Reads one-line (.list) and deb822 (.sources) files, by default /etc/apt/sources.list and
# /etc/apt/sources.list.d/*.{list,sources}; skips deb-src entries and disabled deb822 ones.
# Prints the URI, or nothing when no source serves SUITE.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 SUITE [SOURCES_FILE...]" >&2; exit 2; }
suite=$1
shift
files=()
if [ $# -gt 0 ]; then
  files=("$@")
else
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] && files+=("$file")
  done
fi
[ ${#files[@]} -gt 0 ] || exit 0

awk -v suite="$suite" '
  function flush() {
    if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "" && !found) {
      print uri
      found = 1
    }
    types = ""; suites = ""; uri = ""
  }
  FNR == 1 { flush() }
  FILENAME ~ /\.sources$/ {
    if ($0 ~ /^[ \t]*$/) { flush(); next }
    if ($1 == "Types:") { types = $0; sub(/^Types:[ \t]*/, "", types) }
    if ($1 == "URIs:") uri = $2
    if ($1 == "Suites:") { suites = $0; sub(/^Suites:[ \t]*/, "", suites) }
    if ($1 == "Enabled:" && $2 == "no") types = ""
    next
  }
  $1 == "deb" && !found {
    i = 2
    if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
    if ($(i + 1) == suite) { print $i; found = 1 }
  }
  END { flush() }
' "${files[@]}"
