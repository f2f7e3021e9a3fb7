"""``manage.py arena_release --out DIR``: write a versioned data release (Parquet, dataset card, checksums)
at the newest rating snapshot (arena/publication/releases.py, docs/privacy.md)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from arena.play.base import ArenaError
from arena.publication.releases import release_build


class Command(BaseCommand):
    help = "Write a data release of the published battles, the votes and the ratings at the newest snapshot."

    def add_arguments(self, parser):
        parser.add_argument("--out", default=None, help="folder to write the release folder into (default ARENA_RELEASES_DIR)")

    def handle(self, *args, out=None, **options):
        if out is not None:
            out = Path(out)
            if out.exists() and not out.is_dir():
                raise CommandError(f"--out {out} is a file, not a folder")
        try:
            release = release_build(out=out)
        except ArenaError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write the release: {exc}") from None
        counts = release.counts
        self.stdout.write(
            f"release {release.version} in {release.path}: {counts['battles']} battles, {counts['votes']} votes, "
            f"{counts['ratings_rows']} rating rows"
        )
