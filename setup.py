"""dcnlab packaging.

One importable namespace: the top-level directories of the product layout are
mapped under ``dcnlab.*`` so nothing generic like ``apps`` lands in site-packages.
Ryu 4.34 needs ``setuptools<67`` to build; scripts/setup.sh passes that constraint.
"""

import os
import sysconfig

from setuptools import setup

_SUBPACKAGES = ("controller", "apps", "topo", "benchmarks", "hosts", "lab")


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    # dcnlab/ itself and its own subpackages (dcnlab.model), then the mapped directories.
    # Every package must be listed: a wheel carries only those (an editable install would
    # find an unlisted dcnlab/<sub> anyway and hide the omission).
    tops = [("dcnlab", "")] + [(top, "dcnlab.") for top in _SUBPACKAGES]
    for top, prefix in tops:
        for root, _dirs, files in os.walk(top):
            if "__init__.py" not in files:
                continue
            name = prefix + root.replace(os.sep, ".")
            packages.append(name)
            package_dir[name] = root
    return packages, package_dir


def _site_packages_rel() -> str:
    """site-packages relative to the install prefix (data_files are prefix-relative)."""
    paths = sysconfig.get_paths()
    return os.path.relpath(paths["purelib"], paths["data"])


PACKAGES, PACKAGE_DIR = _packages()

setup(
    name="dcnlab",
    version="0.1.0",
    description="SDN toolkit for multipath load balancing and congestion control in data centers",
    python_requires=">=3.11",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={
        "dcnlab.benchmarks": ["experiments/*.yaml", "workloads/*.cdf", "papers/*.yaml"],
        "dcnlab.hosts.uc3_agent": ["clamp.bpf.c", "build_bpf.sh", "clamp.bpf.o"],
        "dcnlab.hosts.dctcp": ["dctcp.bpf.c", "build_bpf.sh", "dctcp.bpf.o"],
        "dcnlab.benchmarks.engine": ["flowtap.bpf.c", "build_flowtap.sh", "flowtap.bpf.o"],
    },
    # The .pth runs dcnlab.compat.install() at interpreter start-up (see dcnlab/compat.py).
    data_files=[(_site_packages_rel(), ["dcnlab-compat.pth"])],
    install_requires=[
        "ryu==4.34",
        "eventlet==0.41.3",
        "networkx==3.6.1",
        "numpy==2.4.6",
        "scipy==1.17.1",
        "PyYAML==6.0.3",
        "matplotlib==3.11.2",
        "mininet==2.3.0.dev6",
        "asyncssh==2.24.1",  # lab mode: the hosts are driven over SSH
        # dcnlab run --cluster: runs spread over machines (docs/cluster.md)
        "dask==2026.8.0",
        "distributed==2026.8.0",
        "dask-jobqueue==0.9.0",
    ],
    extras_require={"dev": ["pytest==9.2.0", "ruff==0.17.6", "hypothesis==6.170.15"]},
    entry_points={"console_scripts": [
        "dcnlab=dcnlab.cli:main",
        "dcnlab-agent=dcnlab.hosts.uc3_agent.__main__:main",
    ]},
)
