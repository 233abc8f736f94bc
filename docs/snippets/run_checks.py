import asyncio
import json
import sys
from pathlib import Path

from kubedevice.conformance import CheckOptions, run_checks


async def main(plugin_dir: Path) -> int:
    report = await run_checks(CheckOptions(plugin_dir=plugin_dir, timeout=30, restart_timeout=15))
    print(json.dumps(report.to_json()["summary"]))
    return 1 if report.failed else 0


raise SystemExit(asyncio.run(main(Path(sys.argv[1]))))
