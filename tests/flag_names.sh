#!/usr/bin/env bash
# The library names fields, the CLI names flags: no string of the library
# (plan, sim, report, exec, core, kernels; comments aside) names a
# command-line flag (--tp), its own or another program's. A field the user
# sets is named in backquotes (`tp`), and cli/ shows its flag (px_cli_words);
# text that names a flag for the user takes it from px_report_flag, and a
# command line of another program (mpirun, torchrun) is composed in cli/.
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
    while ($text =~ /"((?:[^"\\]|\\.)*)"/g) {
      my ($s, $at) = ($1, $-[0]);
      next unless $s =~ /(?<![a-z0-9])--[a-z]/;
      my $line = 1 + (substr($text, 0, $at) =~ tr/\n//);
      print "FAIL: $f:$line: \"$s\" names a flag; name the field in backquotes (`tp`), the CLI shows its flag\n";
      $fails++;
    }
  }
  print "$fails failures\n";
  exit($fails ? 1 : 0);
' $(find plan sim report exec core kernels \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
