from ui.template import experiment_page

experiment_page("jacobian")
