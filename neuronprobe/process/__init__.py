"""Process supervision: user code and SDK work run in children that can be killed.

``isolation`` forks one step into its own process group, with a time and memory
bound and a stack dump before a kill; ``lifeline`` makes a child die with its
parent; ``worker`` runs an analysis in such a child and turns how it ended into
one error sentence.
"""
