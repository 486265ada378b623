"""Azure's URLs as a :mod:`dataio.fs` scheme: registered with fs when this package is imported,
so fs holds no Azure code (it only names this package among its scheme providers)."""

from __future__ import annotations

from dataio import fs as fsutil
from dataio.azure.commit import replace
from dataio.azure.credentials import absorb_sas, filesystem_and_path, with_account
from dataio.azure.urls import is_azure_url, parse, url_like


class AzureScheme:
    """abfs, abfss, az, https://ACCOUNT.blob.core.windows.net and Azurite's path-style URLs."""

    name = "azure"
    # A listing's details are what ``fs.info`` says (adlfs builds both with one function).
    trusted_listing = True
    # A Put Blob is all-or-nothing: a small file needs no temporary + rename.
    writes_whole = True

    def claims(self, path: str) -> bool:
        return is_azure_url(path)

    def owns(self, fs) -> bool:
        try:
            from adlfs import AzureBlobFileSystem  # the [azure] extra
        except ImportError:
            return False
        return isinstance(fs, AzureBlobFileSystem)

    def filesystem_and_path(self, path: str):
        return filesystem_and_path(path)

    def replace(self, fs, source: str, target: str) -> None:
        replace(fs, source, target)

    def without_credentials(self, url: str) -> str:
        """A SAS in the query is remembered for its container and dropped from the URL."""
        return absorb_sas(url)

    def url_like(self, base: str, inner: str) -> str:
        return url_like(base, inner)

    def location(self, path: str) -> tuple[str, str] | None:
        """(``azure://ACCOUNT/CONTAINER``, blob path) for :func:`dataio.locations.resolve_location`;
        None for a URL that is not well formed (compared as a plain URL)."""
        try:
            loc = parse(path)
        except ValueError:
            return None
        if loc is None:
            return None
        if loc.account is None:
            try:
                loc = with_account(loc)  # the default account, from flags/environment
            except ValueError:
                pass  # none configured: the same (unknown) account for every such URL
        return f"azure://{(loc.account or '').lower()}/{loc.container}", loc.blob


fsutil.register_scheme(AzureScheme())
