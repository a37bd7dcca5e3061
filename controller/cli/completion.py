"""Shell completion generated from the parser itself: verbs, then each verb's flags."""

from __future__ import annotations

import argparse


def _verbs(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for action in parser._actions:  # argparse has no public walk of its tree
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                flags = [o for a in sub._actions for o in a.option_strings]
                found[name] = sorted(flags)
    return found


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    verbs = _verbs(parser)
    cases = "\n".join(f'    {verb}) flags="{" ".join(flags)}" ;;' for verb, flags in verbs.items())
    body = f"""_dmrollout() {{
  local cur verb flags
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  verb="${{COMP_WORDS[1]}}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "{" ".join(verbs)} --help --version" -- "$cur"))
    return
  fi
  case "$verb" in
{cases}
    *) flags="" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [ "$verb" = get ] || [ "$verb" = status ] || [ "$verb" = history ] \\
      || [ "$verb" = promote ]; then
    COMPREPLY=($(compgen -W "$(kubectl get dm -o name 2>/dev/null | sed 's|.*/||')" -- "$cur"))
  fi
}}
complete -F _dmrollout dmrollout
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
