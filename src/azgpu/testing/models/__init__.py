"""What ARM checks and changes, per provider, as moto keeps it in its models: the routes turn a URL
and body into a call here; these modules hold the checks (ARM's error answers) and the state
changes, on the Backend's store. Nothing here knows about HTTP beyond the Request/Response pair.
"""
