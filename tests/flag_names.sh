#!/usr/bin/env bash
# The library names fields, the CLI names flags: no error message of the
# library (a string of a px_err_set or px_err_prefix call) names a
# command-line flag (--tp). A field the user sets is named in backquotes
# (`tp`), and cli/ shows its flag (px_cli_words).
# TODO(lead): add exec/ once its messages name fields (16 name flags today).
set -u
src=${1:-.}
cd "$src" || exit 1
perl -e '
  my $fails = 0;
  for my $f (@ARGV) {
    open my $fh, "<", $f or die "$f: $!";
    local $/;
    my $text = <$fh>;
    $text =~ s{/\*.*?\*/}{ (my $c = $&) =~ s/[^\n]/ /g; $c }gse; # comments, keeping the lines
    while ($text =~ /(?:px_err_(?:set|prefix)|fprintf\s*\(\s*stderr\s*,)\s*\(?((?:[^;"]|"(?:[^"\\]|\\.)*")*)\)\s*;/g) {
      my ($args, $at) = ($1, $-[0]);
      while ($args =~ /"((?:[^"\\]|\\.)*)"/g) {
        my $s = $1;
        next unless $s =~ /(?<![a-z])--[a-z]/;
        my $line = 1 + (substr($text, 0, $at) =~ tr/\n//);
        print "FAIL: $f:$line: \"$s\" names a flag; name the field in backquotes (`tp`), the CLI shows its flag\n";
        $fails++;
      }
    }
  }
  print "$fails failures\n";
  exit($fails ? 1 : 0);
' $(find plan sim report exec -name '*.c' -o -name '*.h' | sort)
