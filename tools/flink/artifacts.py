"""What a Flink run needs besides the cluster, built or fetched once into build/flink/ and reused:
the runnable Beam Flink job server jar (``tools/flink/fetch_job_server.sh``, Maven), the runner-lib
jar beside it for a cluster's lib/, and Flink's own distribution unpacked from PyPI's
``apache-flink`` and ``apache-flink-libraries`` files (see cluster.py's docstring).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "flink")
FETCH_SCRIPT = os.path.join(ROOT, "tools", "flink", "fetch_job_server.sh")
# The Flink release that org.apache.beam:beam-runners-flink-1.19 is compiled against (its pom's
# flink-clients/flink-runtime version): the job server's Flink client and the cluster match exactly.
FLINK_VERSION = "1.19.0"
FLINK_MINOR = "1.19"


def beam_version() -> str:
    """The apache-beam version pinned in requirements.txt."""
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        for line in handle:
            match = re.match(r"apache-beam(\[[^\]]*\])?==([0-9.]+)", line.strip())
            if match:
                return match.group(2)
    raise RuntimeError("requirements.txt pins no apache-beam==X")


def job_server_jar() -> str:
    """Path of the runnable job server jar; built with Maven the first time (about 40 s, 160 MB)."""
    completed = subprocess.run(["bash", FETCH_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                               env=dict(os.environ, FLINK_VERSION=FLINK_MINOR))
    if completed.returncode != 0:
        raise RuntimeError(f"fetch_job_server.sh failed:\n{completed.stderr[-4000:]}")
    return completed.stdout.strip().splitlines()[-1]


def runner_lib_jar(job_server: Optional[str] = None) -> str:
    """The Beam runner classes without Flink's, built beside the job server jar, for the cluster's lib/."""
    job_server = job_server or job_server_jar()
    return job_server.replace("-job-server-", "-runner-lib-")


def flink_home(version: str = FLINK_VERSION) -> str:
    """A runnable Flink distribution in build/flink/flink-VERSION, unpacked from PyPI on first use."""
    home = os.path.join(BUILD, f"flink-{version}")
    if os.path.exists(os.path.join(home, ".complete")):
        return home
    downloads = os.path.join(BUILD, "downloads")
    os.makedirs(downloads, exist_ok=True)
    wheel = glob.glob(os.path.join(downloads, f"apache_flink-{version}-*.whl"))
    libraries = glob.glob(os.path.join(downloads, f"apache[-_]flink[-_]libraries-{version}*"))
    if not wheel or not libraries:
        # Only the files: these packages pin an old apache-beam and must not enter the environment.
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", downloads,
                        f"apache-flink=={version}", f"apache-flink-libraries=={version}"], check=True)
        wheel = glob.glob(os.path.join(downloads, f"apache_flink-{version}-*.whl"))
        libraries = glob.glob(os.path.join(downloads, f"apache[-_]flink[-_]libraries-{version}*"))
    staging = tempfile.mkdtemp(prefix=f".flink-{version}-", dir=BUILD)
    with zipfile.ZipFile(wheel[0]) as archive:  # bin/ and conf/ live in the wheel under pyflink/
        for member in archive.namelist():
            top = member.split("/")[1] if member.startswith("pyflink/") and member.count("/") >= 2 else ""
            if top in ("bin", "conf") and not member.endswith("/"):
                target = os.path.join(staging, member[len("pyflink/"):])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with archive.open(member) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
    _unpack_libraries(libraries[0], staging)
    for script in glob.glob(os.path.join(staging, "bin", "*")):
        os.chmod(script, 0o755)
    for folder in ("log", "plugins", "opt"):
        os.makedirs(os.path.join(staging, folder), exist_ok=True)
    if not glob.glob(os.path.join(staging, "lib", "flink-dist*.jar")):
        raise RuntimeError(f"no lib/flink-dist*.jar in {libraries[0]}")
    open(os.path.join(staging, ".complete"), "w").close()
    shutil.rmtree(home, ignore_errors=True)
    os.rename(staging, home)
    return home


def _unpack_libraries(archive_path: str, staging: str) -> None:
    """deps/{lib,opt,bin} of apache-flink-libraries (an sdist .tar.gz, or a wheel in later releases)."""
    wanted = {"lib", "opt", "bin"}
    if archive_path.endswith(".tar.gz"):
        with tarfile.open(archive_path) as archive:
            for member in archive.getmembers():
                parts = member.name.split("/")
                if member.isfile() and len(parts) >= 4 and parts[1] == "deps" and parts[2] in wanted:
                    target = os.path.join(staging, *parts[2:])
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with archive.extractfile(member) as source, open(target, "wb") as out:
                        shutil.copyfileobj(source, out)
        return
    with zipfile.ZipFile(archive_path) as archive:
        for member in archive.namelist():
            parts = member.split("/")
            if len(parts) >= 3 and parts[0] == "pyflink" and parts[1] in wanted and not member.endswith("/"):
                target = os.path.join(staging, *parts[1:])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with archive.open(member) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
