"""script_checks.py: every condition a shell suite's check names is asserted.

    script_checks.py SCRIPT...

testlib.sh's check and expect_status assert one command each. In

    check "a and b" [ "$a" = 1 ] && [ "$b" = 2 ]

the shell runs check with `[ "$a" = 1 ]` alone, then the test of b, whose
status nobody looks at (check's own is always 0): the check cannot fail on
b. This reads the scripts as the shell parses them (continuation lines,
quotes, substitutions, here-documents) and reports every check or
expect_status followed by &&, || or | on its own command line. Exit status
1 if it found any, 2 if a script cannot be read. test/test_checkers.py
(make check) checks that it catches the shape, and runs it on test/*.sh."""
import sys

ASSERTIONS = ("check", "expect_status")
# Words after which a command is still to come.
PREFIXES = ("if", "then", "do", "else", "elif", "while", "until", "!", "time", "{")
# Operators that end a command (a newline is "\n"); those that make the
# check's line a list whose rest the check does not see.
ENDS = ("\n", ";", ";;", "&", "&&", "||", "|", "|&", "(", ")")
JOINED = ("&&", "||", "|", "|&")


class Tokens:
    """The words and operators of a script, each with its line number."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.line = 1
        self.heredocs = []  # (delimiter, strip tabs) waiting for the next newline
        self.out = []

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def advance(self, n=1):
        for _ in range(n):
            if self.peek() == "\n":
                self.line += 1
            self.i += 1

    def skip_quoted(self, end):
        """Past a '...' (end "'") or "..." (end '"') whose opening is passed."""
        while self.i < len(self.s) and self.peek() != end:
            if end == '"' and self.peek() == "\\":
                self.advance(2)
            elif end == '"' and self.peek() in "$`":
                self.skip_dollar_or_backquote()
            else:
                self.advance()
        self.advance()  # the closing quote

    def skip_balanced(self, opening, closing):
        """Past a $(...), $((...)) or ${...} whose opening is passed."""
        depth = 1
        while self.i < len(self.s) and depth:
            c = self.peek()
            if c == "\\":
                self.advance(2)
                continue
            self.advance()
            if c in "'\"":
                self.skip_quoted(c)
            elif c == "`":
                self.skip_quoted("`")
            elif c == opening:
                depth += 1
            elif c == closing:
                depth -= 1

    def skip_dollar_or_backquote(self):
        c = self.peek()
        self.advance()
        if c == "`":
            self.skip_quoted("`")
        elif self.peek() == "(":
            self.advance()
            self.skip_balanced("(", ")")
        elif self.peek() == "{":
            self.advance()
            self.skip_balanced("{", "}")

    def word(self):
        """One word from here (quotes and substitutions are part of it)."""
        start = self.i
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                break  # a continuation ends the word
            if c == "\\":
                self.advance(2)
            elif c in "'\"":
                self.advance()
                self.skip_quoted(c)
            elif c in "$`":
                self.skip_dollar_or_backquote()
            elif c in "<>":
                self.advance()
                while self.peek() in "<>&|-":  # 2>&1, >|, <<-, >&2
                    self.advance()
            elif c in " \t\n;&|()":
                break
            else:
                self.advance()
        return self.s[start:self.i]

    def read_heredocs(self):
        """At a newline: skip the bodies of the here-documents it starts."""
        for delimiter, strip in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                body_line = self.s[self.i:end]
                self.advance(end + 1 - self.i)
                if (body_line.lstrip("\t") if strip else body_line) == delimiter:
                    break
        self.heredocs = []

    def note_heredoc(self, redirection, following):
        """<<WORD, <<-WORD, <<'WORD': its body starts at the next line."""
        strip = redirection.endswith("<<-")
        delimiter = following.replace("'", "").replace('"', "").replace("\\", "")
        self.heredocs.append((delimiter, strip))

    def scan(self):
        pending_heredoc = None
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                self.advance(2)  # a continuation line: the same command
            elif c in " \t":
                self.advance()
            elif c == "#":
                while self.i < len(self.s) and self.peek() != "\n":
                    self.advance()
            elif c == "\n":
                self.out.append(("\n", self.line))
                self.advance()
                self.read_heredocs()
            elif c in ";&|()":
                two = self.s[self.i:self.i + 2]
                op = two if two in (";;", "&&", "||", "|&") else c
                self.out.append((op, self.line))
                self.advance(len(op))
            else:
                line = self.line
                w = self.word()
                if pending_heredoc is not None:
                    self.note_heredoc(pending_heredoc, w)
                    pending_heredoc = None
                elif w.endswith("<<") or w.endswith("<<-"):
                    pending_heredoc = w
                elif "<<" in w and not w.startswith("<<<"):
                    at = w.index("<<")
                    dash = w[at + 2:at + 3] == "-"
                    self.note_heredoc(w[:at + 2 + dash], w[at + 2 + dash:])
                self.out.append(("word", line, w))
        return self.out


def unasserted(text):
    """(line, assertion) for each check followed by &&, || or |."""
    found = []
    tokens = Tokens(text).scan()
    at_start, current = True, None
    for t in tokens:
        if t[0] == "word":
            if at_start and t[2] in PREFIXES:
                continue
            if at_start:
                current = (t[1], t[2]) if t[2] in ASSERTIONS else None
            at_start = False
        elif t[0] in ENDS:
            if current and t[0] in JOINED:
                found.append(current)
            current, at_start = None, True
    return found


def main(paths):
    bad = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"{path}: cannot read it: {e}")
            return 2
        for line, what in unasserted(text):
            bad += 1
            print(f"{path}:{line}: {what} asserts only the command before the first &&, || or |:"
                  f" what follows runs outside it, and cannot fail it (one {what} per condition)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
