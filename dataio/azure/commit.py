"""Commit on Azure: ``source`` becomes ``target`` whole, and no secret is stored in the account.

Contract: :func:`replace` commits ``source`` to ``target``: a real rename on an ADLS Gen2
hierarchical namespace; otherwise a server-side copy waited on until it succeeded (or, when the
credential is a SAS, staged blocks and one block-list commit, so that no copy source with
``sig=`` is ever stored on a blob), then the source deleted. Either way ``target`` is complete
whenever it exists. Writes go through adlfs block blobs (staged blocks of ``block_size`` bytes,
committed at close), so memory per open file is bounded by the block size and an unfinished
upload never shows as a blob. What each account supports is learnt once and kept in
:data:`dataio.azure.state.STATE`.
"""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import urlsplit

from dataio.azure.credentials import default_credential
from dataio.azure.state import STATE

COPY_POLL_MAX_SECONDS = 5.0
COPY_TIMEOUT_SECONDS = 6 * 3600
# A commit under SAS stages the target's blocks from the source: server-side blocks of this
# size (Put Block From URL takes up to 4000 MiB; smaller ones keep each request short), a few
# requests in flight.
BLOCK_FROM_URL_BYTES = 100 * 2**20
STAGE_CONCURRENCY = 4


def replace(fs, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (both ``container/blob`` on ``fs``), replacing it.

    ADLS Gen2 with a hierarchical namespace: one atomic rename. Flat namespace: the content is
    committed under ``target`` in one request at the end (a server-side copy waited on until
    it succeeded, or a block list), then the source deleted; ``target`` only ever shows the
    previous or the complete new content.

    No secret may be stored in the account: a Copy Blob keeps its source URL in the target's
    ``x-ms-copy-source`` property for the blob's lifetime, so a copy is used only when the
    source URL carries no query (account key, connection string with a key, Entra ID). With a
    SAS, blocks are staged under ``target`` (Put Block From URL: the SAS travels in one
    request's header and is kept nowhere; where the service lacks that call, e.g. Azurite, the
    bytes are streamed through in bounded blocks) and the block list committed.
    """
    from fsspec.asyn import sync

    if _hierarchical_namespace(fs) and _rename_on_dfs(fs, source, target):
        fs.invalidate_cache()
        return
    sync(fs.loop, _commit_copy, fs, source, target)
    fs.rm_file(source)
    fs.invalidate_cache()


async def _commit_copy(fs, source: str, target: str) -> None:
    src_container, src_blob, _ = fs.split_path(source)
    dst_container, dst_blob, _ = fs.split_path(target)
    async with fs.service_client.get_blob_client(src_container, src_blob) as source_client, \
            fs.service_client.get_blob_client(dst_container, dst_blob) as target_client:
        if urlsplit(source_client.url).query:
            await _commit_by_blocks(source_client, target_client, source, target)
        else:
            await _copy_and_wait(source_client, target_client, source, target)


async def _copy_and_wait(source_client, target_client, source: str, target: str) -> None:
    from azure.core.exceptions import ResourceNotFoundError

    try:
        result = await target_client.start_copy_from_url(source_client.url)
    except ResourceNotFoundError as error:
        raise FileNotFoundError(f"{source}: no such blob to commit") from error
    status = result.get("copy_status")
    delay, waited = 0.05, 0.0
    while status == "pending":
        if waited > COPY_TIMEOUT_SECONDS:
            await target_client.abort_copy(result["copy_id"])
            raise TimeoutError(f"server-side copy {source} -> {target} still pending after "
                               f"{waited:.0f} s; aborted")
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, COPY_POLL_MAX_SECONDS)
        status = (await target_client.get_blob_properties()).copy.status
    if status != "success":
        raise OSError(f"server-side copy {source} -> {target} ended with status {status}")


async def _commit_by_blocks(source_client, target_client, source: str, target: str) -> None:
    """Stage ``source``'s bytes as blocks of ``target`` and commit the block list: ``target``
    appears (or changes) only at the commit, complete. Blocks left by a killed attempt stay
    uncommitted (invisible, discarded by the service) and a rerun's commit names only its own."""
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    try:
        props = await source_client.get_blob_properties()
    except ResourceNotFoundError as error:
        raise FileNotFoundError(f"{source}: no such blob to commit") from error
    # Fixed-width ids (the service wants every block id of a blob the same length), unique per
    # attempt so that blocks staged by an earlier, killed attempt are never committed.
    attempt = uuid.uuid4().hex
    account = source_client.account_name
    server_side = STATE.block_from_url.get(account, True)
    if server_side:
        try:
            ids = await _stage_blocks(props.size, BLOCK_FROM_URL_BYTES, attempt,
                                      lambda block_id, offset, length:
                                      target_client.stage_block_from_url(
                                          block_id, source_client.url, source_offset=offset,
                                          source_length=length))
        except HttpResponseError as error:
            if error.status_code != 501:   # 501: this service has no Put Block From URL
                raise
            STATE.block_from_url[account] = server_side = False
    if not server_side:
        async def stream(block_id, offset, length):
            download = await source_client.download_blob(
                offset, length, etag=props.etag, match_condition=MatchConditions.IfNotModified)
            await target_client.stage_block(block_id, await download.readall())

        ids = await _stage_blocks(props.size, STATE.current_plan().block_size, attempt, stream)
    await target_client.commit_block_list(ids, content_settings=props.content_settings,
                                          metadata=props.metadata or None)


async def _stage_blocks(size: int, block_bytes: int, attempt: str, stage) -> list[str]:
    """Call ``stage(block_id, offset, length)`` for every block of a ``size``-byte blob, at
    most ``STAGE_CONCURRENCY`` at once (memory: that many blocks when streaming)."""
    spans = [(f"{attempt}{i:08d}", offset, min(block_bytes, size - offset))
             for i, offset in enumerate(range(0, size, block_bytes))]
    gate = asyncio.Semaphore(STAGE_CONCURRENCY)

    async def one(span):
        async with gate:
            await stage(*span)

    tasks = [asyncio.ensure_future(one(span)) for span in spans]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:   # the first failure decides; the rest must not run on unobserved
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [block_id for block_id, _, _ in spans]


def _hierarchical_namespace(fs) -> bool:
    account = getattr(fs, "account_name", None) or fs.service_client.account_name
    if account in STATE.hns:
        return STATE.hns[account]
    from fsspec.asyn import sync

    async def query():
        return (await fs.service_client.get_account_information()).get("is_hns_enabled")

    try:
        enabled = bool(sync(fs.loop, query))
    except Exception:   # a container-scoped SAS may not read account information: assume flat
        enabled = False
    STATE.hns[account] = enabled
    return enabled


def _rename_on_dfs(fs, source: str, target: str) -> bool:
    """Rename through the Data Lake (dfs) endpoint; False when that client is unavailable."""
    try:
        from azure.storage.filedatalake import DataLakeServiceClient
    except ImportError:
        return False
    options = fs.storage_options
    src_container, src_path, _ = fs.split_path(source)
    dst_container, dst_path, _ = fs.split_path(target)
    if options.get("connection_string"):
        service = DataLakeServiceClient.from_connection_string(options["connection_string"])
    else:
        _, credential = default_credential()
        account_url = fs.account_url.replace(".blob.", ".dfs.")
        service = DataLakeServiceClient(account_url=account_url, credential=credential)
    with service:
        client = service.get_file_client(src_container, src_path)
        client.rename_file(f"{dst_container}/{dst_path}")
    return True
