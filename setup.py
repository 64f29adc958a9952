"""Build hook: a wheel carries the pinned-model manifest (models/manifest.json) inside the package
as offline_mem/pinned_models.json, so an installed offline_mem knows which models to fetch and
verify without a checkout. Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

MANIFEST = Path(__file__).resolve().parent / "models" / "manifest.json"


class BuildWithPinnedModels(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:  # an editable install reads the checkout's models/ itself
            target = Path(self.build_lib) / "offline_mem" / "pinned_models.json"
            target.write_bytes(MANIFEST.read_bytes())


setup(cmdclass={"build_py": BuildWithPinnedModels})
