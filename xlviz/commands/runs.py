"""``xlviz runs delete|archive|note|tag|dependencies RUN``: manage run folders as the app's Runs page does.

A RUN is a run's name under the checkpoints root (``--out``, else ``$XLVIZ_CHECKPOINTS``,
else ``./checkpoints``), ``<sweep>/<cell>``, or a path to it; either way the folder must sit
directly in that root (a cell: in a sweep folder there), be a real folder (never a link) that
xlviz made (never a model folder) and, to be deleted or archived, not be running (a sweep: none
of its cells). ``delete`` and ``archive`` take a whole sweep folder too, never one of its cells. ``delete`` removes it for good (``--yes``
confirms), ``archive`` moves it into ``<root>/.archive/``; ``note`` and ``tag`` edit its
``notes.json`` (printed when given nothing to set). ``dependencies`` records which stages each
model of a run written before they were recorded comes from, so the probes judge each model by
its own stages (:mod:`xlviz.transfer.dependencies`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="delete, archive, annotate or tag a run folder", description=__doc__.splitlines()[0])
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help, description=help)
        a.add_argument("run", metavar="RUN", help="run name under the checkpoints root, or a path to it")
        a.add_argument("--out", help="checkpoints root (default: $XLVIZ_CHECKPOINTS or ./checkpoints)")
        return a

    a = action("delete", "delete a run folder for good (not while it runs)")
    a.add_argument("--yes", action="store_true", help="confirm: without it nothing is deleted")
    action("archive", "move a run folder into <root>/.archive/ (not while it runs)")
    a = action("note", "print the run's note, or replace it with TEXT")
    a.add_argument("text", nargs="?", metavar="TEXT", help="the new note ('' clears it)")
    a = action("tag", "print the run's tags, or add TAGs / --remove some")
    a.add_argument("tags", nargs="*", metavar="TAG", help="tags to add (letters, digits, '-', '_')")
    a.add_argument("--remove", nargs="+", default=[], metavar="TAG", help="tags to remove")
    action("dependencies", "record which stages each model comes from, in a run written before they were recorded "
           "(the probes then judge each model by its own stages)")
    p.set_defaults(handler=run)


def _locate(run: str, out: str | None):
    """(root, name) of RUN under the checkpoints root (``--out``, else ``$XLVIZ_CHECKPOINTS``,
    else ``./checkpoints``): a bare name, ``<sweep>/<cell>``, or a path whose folder is that
    root (a cell's: a sweep folder in it). A path anywhere else is refused, never read as the
    run of that name in the root; ``--out`` that is not the path's folder is an error."""
    import os
    from pathlib import Path

    from xlviz.errors import XlvizError
    from xlviz.runs import checkpoints_root, is_sweep_folder

    root = checkpoints_root(out)
    path = Path(run)
    if len(path.parts) == 1 and not path.is_absolute():
        return root, run
    if (len(path.parts) == 2 and not path.is_absolute() and ".." not in path.parts
            and is_sweep_folder(root / path.parts[0])):
        return root, run  # <sweep>/<cell>, the cell's run name
    parent = path.parent
    real_root = os.path.realpath(root)
    if os.path.realpath(parent) == real_root:
        return root, path.name
    if os.path.realpath(parent.parent) == real_root and not parent.is_symlink() and is_sweep_folder(parent):
        return root, f"{parent.name}/{path.name}"
    if out:
        raise XlvizError(f"lies in {os.path.realpath(parent)}, not in the checkpoints root {real_root} given by --out; "
                         "name the run alone, or give --out the folder that holds it", path=run, field="--out")
    raise XlvizError(f"lies outside the checkpoints root {real_root} ($XLVIZ_CHECKPOINTS, else ./checkpoints); "
                     "give --out the folder that holds it", path=run, field="run")


def run(args: argparse.Namespace) -> int:
    from xlviz import jobs
    from xlviz.errors import XlvizError
    from xlviz.runs import Run, run_folder

    root, name = _locate(args.run, args.out)
    if args.action == "delete":
        if not args.yes:
            raise XlvizError("deleting a run cannot be undone: add --yes to confirm (or archive it)", field="--yes")
        path = run_folder(root, name, sweeps=True)
        jobs.delete_run(root, name)
        print(f"deleted {path}")
    elif args.action == "archive":
        print(f"archived to {jobs.archive_run(root, name)}")
    elif args.action == "dependencies":
        from xlviz.transfer.dependencies import record_dependencies

        done = record_dependencies(run_folder(root, name))
        print(f"recorded the stages of {len(done)} model(s)" if done else "every model's stages were already recorded")
    else:
        run_ = Run(run_folder(root, name))
        if args.action == "note":
            if args.text is None:
                print(run_.notes()["note"])
            else:
                run_.write_notes(note=args.text)
        else:
            tags = run_.notes()["tags"]
            if args.tags or args.remove:
                tags = [t for t in tags + list(args.tags) if t not in set(args.remove)]
                tags = run_.write_notes(tags=tags)["tags"]
            print(", ".join(tags))
    return 0
