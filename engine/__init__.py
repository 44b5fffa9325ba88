"""The in-process engine: a PomoLogic program run inside this process, with its base
relations in memory (no server, no Spark, no files). Tests use it as the fully materialized
reference of the server's partial state."""
