package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The shell scripts ask the binary itself for the words that may follow
// (urfave/cli's hidden --generate-bash-completion flag), so they never go
// stale as commands and flags change.
const bashCompletion = `# txncoord completion for bash: source <(txncoord completion bash)
_txncoord_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _txncoord_complete txncoord
`

const zshCompletion = `#compdef txncoord
# txncoord completion for zsh: source <(txncoord completion zsh)
_txncoord() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} $cur --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ -n "${opts[1]}" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _txncoord txncoord
`

func completionCommand() *cli.Command {
	script := func(shell string, text func(*cli.Context) (string, error)) *cli.Command {
		return &cli.Command{
			Name:  shell,
			Usage: "print the " + shell + " completion script",
			Action: func(c *cli.Context) error {
				s, err := text(c)
				if err == nil {
					_, err = fmt.Fprint(c.App.Writer, s)
				}
				return err
			},
		}
	}
	constant := func(s string) func(*cli.Context) (string, error) {
		return func(*cli.Context) (string, error) { return s, nil }
	}
	return &cli.Command{
		Name:  "completion",
		Usage: "print a shell completion script: bash, zsh or fish",
		Description: `Examples:
   source <(txncoord completion bash)
   txncoord completion fish > ~/.config/fish/completions/txncoord.fish`,
		Subcommands: []*cli.Command{
			script("bash", constant(bashCompletion)),
			script("zsh", constant(zshCompletion)),
			script("fish", func(c *cli.Context) (string, error) { return c.App.ToFishCompletion() }),
		},
	}
}
