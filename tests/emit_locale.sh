#!/bin/sh
# Runs test_emit_locale under tr_TR.ISO-8859-9, a locale whose toupper('i') is not 'I', built
# into DIR with localedef. Exits 77 (skipped) where the locale cannot be built.
# Usage: emit_locale.sh TEST_BINARY DIR
set -u
dir=$2/locales
mkdir -p "$dir" || exit 1
if ! localedef -i tr_TR -f ISO-8859-9 "$dir/tr_TR.ISO-8859-9" >/dev/null 2>&1 &&
   [ ! -d "$dir/tr_TR.ISO-8859-9" ]; then
  echo "emit_locale: cannot build the tr_TR.ISO-8859-9 locale here (localedef); skipped"
  exit 77
fi
LOCPATH=$dir FT_TEST_LOCALE=tr_TR.ISO-8859-9 exec "$1"
