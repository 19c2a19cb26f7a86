"""Refinement: the decision rules that pick a round's new points, and the loop that runs the
workflow round by round until every boundary is as precise as asked."""
