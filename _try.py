import time
from pathlib import Path
from experiments.sweep import SweepSpec, run_sweep
import ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
spec = SweepSpec(grid={"method": ["scars", "rag"], "ablation": ["none", "no_mdl"], "seed": [0, 1]},
                 fixed={"episodes": 2, "schedule": "smoke", "search_iterations": 30}, name="try")
t=time.time()
r = run_sweep(spec, Path("/tmp/wt16sweep"))
print(time.time()-t)
print(r.runs[["run_name","label","status","success_rate"]])
