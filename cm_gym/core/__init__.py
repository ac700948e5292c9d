"""The vocabulary (tasks, states, actions, outcomes, splits), paths, errors and small shared
utilities: the bottom layer, importing nothing else of cm_gym."""
