"""The Function App: wiring only. Each function lives in a blueprint under scaling/functions/.

collect (timer) -> queue "metrics" -> evaluate (queue) -> queue "actions" -> scale (queue) -> ARM
metrics-poison / actions-poison -> evaluate_poison / scale_poison -> dead-letter table
"""

import azure.functions as func

from scaling.bootstrap import validate_at_startup
from scaling.functions.collect import blueprint as collect_blueprint
from scaling.functions.evaluate import blueprint as evaluate_blueprint
from scaling.functions.poison import blueprint as poison_blueprint
from scaling.functions.scale import blueprint as scale_blueprint

# In a Functions host, a wrong or missing app setting fails the start-up, naming the setting.
validate_at_startup()

app = func.FunctionApp()
app.register_functions(collect_blueprint)
app.register_functions(evaluate_blueprint)
app.register_functions(scale_blueprint)
app.register_functions(poison_blueprint)
